//go:build !unix

package client

import "net"

// fastPath: sends take net/http's path here (fast.go).
const fastPath = false

func alive(net.Conn) bool { return false }
