package compiler_test

import (
	"encoding/hex"
	"fmt"
)

func sprintf(format string, a any) string { return fmt.Sprintf(format, a) }

func hexOf(s string) string { return hex.EncodeToString([]byte(s)) }
