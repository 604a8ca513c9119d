package client

import "syscall"

var errConnRefused error = syscall.ECONNREFUSED
