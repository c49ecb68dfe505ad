package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
)

// colormap anchors: cold (deep blue) through cyan, green, yellow to hot
// (dark red), interpolated linearly in RGB.
var colormap = []color.RGBA{
	{0x1a, 0x1c, 0x6e, 0xff},
	{0x1f, 0x6f, 0xd0, 0xff},
	{0x2f, 0xc4, 0xc8, 0xff},
	{0x6c, 0xd1, 0x5a, 0xff},
	{0xf2, 0xd8, 0x3b, 0xff},
	{0xf0, 0x7b, 0x2a, 0xff},
	{0xa8, 0x14, 0x1c, 0xff},
}

// colorAt maps t in [0, 1] onto the colour map.
func colorAt(t float64) color.RGBA {
	if math.IsNaN(t) || t <= 0 {
		return colormap[0]
	}
	if t >= 1 {
		return colormap[len(colormap)-1]
	}
	x := t * float64(len(colormap)-1)
	i := int(x)
	f := x - float64(i)
	a, b := colormap[i], colormap[i+1]
	mix := func(p, q uint8) uint8 { return uint8(math.Round(float64(p) + f*(float64(q)-float64(p)))) }
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 0xff}
}

// digits is a 3×5 bitmap font for the legend's labels: each glyph is five
// rows of three bits, most significant bit on the left.
var digits = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 2, 2, 2},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2}, '-': {0, 0, 7, 0, 0},
}

// drawText writes s at (x, y) with the bitmap font scaled by scale.
func drawText(img *image.RGBA, x, y, scale int, s string, c color.RGBA) {
	for _, r := range s {
		g, ok := digits[r]
		if ok {
			for row := 0; row < 5; row++ {
				for col := 0; col < 3; col++ {
					if g[row]&(4>>col) == 0 {
						continue
					}
					for dy := 0; dy < scale; dy++ {
						for dx := 0; dx < scale; dx++ {
							img.SetRGBA(x+col*scale+dx, y+row*scale+dy, c)
						}
					}
				}
			}
		}
		x += 4 * scale
	}
}

// RenderPNG draws the ny × nx field (row 0 at the top) scaled up so the
// plate is at least 384 pixels on its long side, with a colour legend and
// its temperature labels on the right, and returns the PNG bytes.
func RenderPNG(field []float64, nx, ny int, lo, hi float64) ([]byte, error) {
	if len(field) != nx*ny || nx <= 0 || ny <= 0 {
		return nil, fmt.Errorf("heat2d: field has %d values, want %d×%d", len(field), nx, ny)
	}
	if hi <= lo {
		hi = lo + 1
	}
	scale := max(1, 384/max(nx, ny))
	w, h := nx*scale, ny*scale
	const margin, barW, labelW = 12, 20, 40
	img := image.NewRGBA(image.Rect(0, 0, margin+w+margin+barW+6+labelW, margin+h+margin))
	black := color.RGBA{0x10, 0x10, 0x10, 0xff}
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	for i := 0; i < ny; i++ {
		for j := 0; j < nx; j++ {
			c := colorAt((field[i*nx+j] - lo) / (hi - lo))
			for dy := 0; dy < scale; dy++ {
				for dx := 0; dx < scale; dx++ {
					img.SetRGBA(margin+j*scale+dx, margin+i*scale+dy, c)
				}
			}
		}
	}
	// Legend: hot at the top, cold at the bottom, with five labels.
	bx := margin + w + margin
	for y := 0; y < h; y++ {
		c := colorAt(1 - float64(y)/float64(max(h-1, 1)))
		for x := 0; x < barW; x++ {
			img.SetRGBA(bx+x, margin+y, c)
		}
	}
	for k := 0; k <= 4; k++ {
		y := margin + k*(h-1)/4
		v := hi - float64(k)*(hi-lo)/4
		for x := 0; x < 4; x++ {
			img.SetRGBA(bx+barW+x, y, black)
		}
		ty := min(max(y-5, 0), img.Bounds().Dy()-10)
		drawText(img, bx+barW+6, ty, 2, fmt.Sprintf("%.0f", v), black)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("heat2d: encode png: %w", err)
	}
	return buf.Bytes(), nil
}
