package testenv_test

import (
	"fmt"
	"os"

	"github.com/ckpt-dev/ckpt/internal/testenv"
)

func ExamplePython() {
	os.Setenv("CKPT_PYTHON", "/opt/torch2/bin/python3")
	defer os.Unsetenv("CKPT_PYTHON")
	fmt.Println(testenv.Python())
	// Output: /opt/torch2/bin/python3
}
