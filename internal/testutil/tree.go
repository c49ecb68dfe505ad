package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
)

// TreeDigests maps every path under the roots to the SHA-256 of the
// file's bytes, or to "dir" for a directory: a picture of storage to
// compare before and after, to show what a job touched. A missing root
// holds nothing; any other error fails the test.
func TreeDigests(t TB, roots ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil && p == root && os.IsNotExist(err):
				return nil
			case err != nil:
				return err
			case d.IsDir():
				out[p] = "dir"
				return nil
			}
			b, err := os.ReadFile(p)
			sum := sha256.Sum256(b)
			out[p] = hex.EncodeToString(sum[:])
			return err
		})
		if err != nil {
			t.Fatalf("digests of %s: %v", root, err)
			return nil
		}
	}
	return out
}
