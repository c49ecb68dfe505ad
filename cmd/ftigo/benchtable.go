package main

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// benchTable renders bench rows as a text table whose columns line up:
// every cell of a column starts (text) or ends (numbers) at the same
// place, whatever the widths of the values.
func benchTable(rows []benchRow) string {
	header := []string{"case", "ranks", "per rank", "persisted", "ftigo s (min-max)", "raw s", "strong s", "vs raw", "vs strong", "cpu s ftigo/raw/strong", "cache"}
	right := []bool{false, true, true, true, true, true, true, true, true, true, false}
	cells := make([][]string, len(rows))
	for i, r := range rows {
		cache := "-"
		if r.Kind == "restart" {
			cache = "kept"
			if r.CacheDropped {
				cache = "dropped"
			}
		}
		cpu := func(c cpuStats) string { return fmt.Sprintf("%.2f", c.User+c.Sys) }
		cells[i] = []string{
			r.Case,
			fmt.Sprint(r.Ranks),
			humanBytes(r.BytesRank),
			humanBytes(r.Persisted),
			fmt.Sprintf("%.3f (%.3f-%.3f)", r.Time.Median, r.Time.Min, r.Time.Max),
			fmt.Sprintf("%.3f", r.Raw.Median),
			fmt.Sprintf("%.3f", r.Strong.Median),
			fmt.Sprintf("%.2fx", r.Ratio),
			fmt.Sprintf("%.2fx", r.RatioStrong),
			cpu(r.CPU) + "/" + cpu(r.RawCPU) + "/" + cpu(r.StrongCPU),
			cache,
		}
	}
	if slices.ContainsFunc(rows, func(r benchRow) bool { return r.Compression != "" }) {
		// The compression ratio, before the last column.
		n := len(header) - 1
		header = slices.Insert(header, n, "compressed", "vs none", "cpu vs none")
		right = slices.Insert(right, n, true, true, true)
		for i, r := range rows {
			ratio := "-"
			if r.CompressionRatio > 0 {
				ratio = fmt.Sprintf("%.2fx", r.CompressionRatio)
			}
			vs, vsCPU := "-", "-"
			if r.Uncompressed != nil {
				vs = fmt.Sprintf("%.2fx", r.RatioUncompressed)
			}
			if r.CPURatioUncompressed > 0 {
				vsCPU = fmt.Sprintf("%.2fx", r.CPURatioUncompressed)
			}
			cells[i] = slices.Insert(cells[i], n, ratio, vs, vsCPU)
		}
	}
	return renderTable(header, cells, right)
}

// renderTable lays cells out in columns two spaces apart, each as wide
// as its widest cell (in runes), right-aligned where right says so; the
// last column is not padded on the right.
func renderTable(header []string, cells [][]string, right []bool) string {
	width := make([]int, len(header))
	for c, h := range header {
		width[c] = utf8.RuneCountInString(h)
	}
	for _, row := range cells {
		for c, s := range row {
			width[c] = max(width[c], utf8.RuneCountInString(s))
		}
	}
	var b strings.Builder
	line := func(row []string) {
		for c, s := range row {
			pad := strings.Repeat(" ", width[c]-utf8.RuneCountInString(s))
			switch {
			case right[c]:
				b.WriteString(pad + s)
			case c == len(row)-1:
				b.WriteString(s)
			default:
				b.WriteString(s + pad)
			}
			if c < len(row)-1 {
				b.WriteString("  ")
			}
		}
		b.WriteString("\n")
	}
	line(header)
	for _, row := range cells {
		line(row)
	}
	return b.String()
}
