package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
)

// dropPageCache asks the kernel to drop clean page-cache pages of the
// whole machine (root only), so that reads come from the device.
func dropPageCache() error {
	syscall.Sync()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("1\n")
	return errors.Join(err, f.Close())
}

// loadAvg returns the 1, 5 and 15 minute load averages, or zeros.
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg") // procfs reports size 0: read to EOF
	if err != nil {
		return out
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// memAvailable returns the kernel's estimate of the memory available to
// new work (MemAvailable), or 0 when unknown.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib << 10
		}
	}
	return 0
}

// kernels measures single-core BLAKE3 and Reed-Solomon throughput and a
// memcpy for scale, in MB/s. The buffers are touched before they are
// timed, so no first-touch page faults are counted.
func kernels() (hash, rsEnc, rsDec, memcpy float64) {
	const n = 64 << 20
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	mbps := func(bytes int, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }
	t0 := time.Now()
	h := b3.New()
	h.Write(buf)
	_ = h.Sum(nil)
	hash = mbps(n, time.Since(t0))

	dst := make([]byte, n)
	copy(dst, buf)
	t0 = time.Now()
	copy(dst, buf)
	memcpy = mbps(n, time.Since(t0))

	code, err := encode.New(4, 4)
	if err != nil {
		return hash, 0, 0, memcpy
	}
	shard := n / 4
	data := [][]byte{buf[:shard], buf[shard : 2*shard], buf[2*shard : 3*shard], buf[3*shard:]}
	parity := make([][]byte, 4)
	for i := range parity {
		parity[i] = make([]byte, shard)
		clear(parity[i])
	}
	t0 = time.Now()
	if err := code.EncodeBlock(data, parity); err != nil {
		return hash, 0, 0, memcpy
	}
	rsEnc = mbps(n, time.Since(t0))
	shards := append(append([][]byte{}, data...), parity...)
	lost := []bool{true, true, false, false, false, false, true, true}
	for i, l := range lost {
		if l {
			shards[i] = make([]byte, shard)
			clear(shards[i])
		}
	}
	t0 = time.Now()
	if err := code.Reconstruct(shards, lost); err == nil {
		rsDec = mbps(n, time.Since(t0))
	}
	return hash, rsEnc, rsDec, memcpy
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
