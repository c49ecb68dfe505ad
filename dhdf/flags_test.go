package dhdf

import "flag"

func flagUpdate() *bool { return flag.Bool("update", false, "rewrite golden files in testdata") }
