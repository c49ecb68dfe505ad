package main

// main is never called: the package is built with -buildmode=c-shared
// into libftigo.so, whose entry points are FTI's C functions.
func main() {}
