package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunUsageAndUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(nil, &out, &errb), "no command is a usage error")
	assert.Contains(t, out.String(), "usage: ftigo <command>")

	out.Reset()
	assert.Equal(t, 0, run([]string{"help"}, &out, &errb))
	assert.Contains(t, out.String(), "Exit codes: 0 success, 1 a problem was found, 2 usage error.")

	out.Reset()
	errb.Reset()
	assert.Equal(t, 2, run([]string{"no-such-command"}, &out, &errb))
	assert.Contains(t, errb.String(), `unknown command "no-such-command"`)
}

func TestEveryRegisteredCommandHasASummary(t *testing.T) {
	for name, c := range commands {
		assert.Equal(t, name, c.name)
		assert.NotEmpty(t, c.summary, "command %s", name)
		assert.NotNil(t, c.run, "command %s", name)
	}
}
