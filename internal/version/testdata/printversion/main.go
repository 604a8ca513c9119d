// Command printversion prints version.String, version.Commit and
// version.Dirty, one a line, for version's tests to build and run.
package main

import (
	"fmt"

	"github.com/weftmesh/weft/internal/version"
)

func main() {
	fmt.Println(version.String())
	fmt.Println(version.Commit())
	fmt.Println(version.Dirty())
}
