package dataset

import "errors"

// Sentinel errors of the dataset package; every error wraps one of them,
// so callers match with errors.Is while the message names the dataset,
// ranks and variables.
var (
	// ErrInvalid is a definition or subset that is wrong by itself: a bad
	// name, rank or extent, an unknown element type, a subset outside its
	// dataset, a variable whose size or element size does not fit its
	// subset.
	ErrInvalid = errors.New("dataset: invalid definition")
	// ErrDuplicate is an id used twice: two definitions under one dataset
	// id (on one rank, or different definitions on different ranks), two
	// datasets with one name, or one variable mapped twice.
	ErrDuplicate = errors.New("dataset: id used twice")
	// ErrOverlap is two subsets covering the same element.
	ErrOverlap = errors.New("dataset: overlapping subsets")
	// ErrGap is an element of a dataset that is not Sparse which no
	// subset covers.
	ErrGap = errors.New("dataset: gap in the subsets")
	// ErrUnknown is a subset of a dataset that is not defined, or a
	// restart asking for a dataset the checkpoint does not hold.
	ErrUnknown = errors.New("dataset: unknown dataset")
	// ErrMismatch is a dataset defined differently at restart than in the
	// checkpoint (shape, element type, name).
	ErrMismatch = errors.New("dataset: definition differs from the checkpoint")
	// ErrBuffer is a destination buffer missing or of the wrong size.
	ErrBuffer = errors.New("dataset: destination buffer")
)
