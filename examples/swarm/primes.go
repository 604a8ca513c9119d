package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// splitRange splits [0, below) into n scopes "lo-hi" (lo ≤ k < hi) of
// nearly equal size.
func splitRange(below, n int) []string {
	scopes := make([]string, n)
	for i := range n {
		scopes[i] = fmt.Sprintf("%d-%d", below*i/n, below*(i+1)/n)
	}
	return scopes
}

// parseScope reads a scope "lo-hi".
func parseScope(s string) (lo, hi int, err error) {
	a, b, _ := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("scope %q: want lo-hi", s)
	}
	return lo, hi, nil
}

// countPrimes counts the primes k with lo ≤ k < hi by trial division:
// deliberately plain, so each scope is a few milliseconds of real work. It
// stops early with ctx's error when ctx ends (the scope was lost).
func countPrimes(ctx context.Context, lo, hi int) (int, error) {
	n := 0
	for k := lo; k < hi; k++ {
		if k%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if isPrime(k) {
			n++
		}
	}
	return n, nil
}

func isPrime(k int) bool {
	if k < 2 {
		return false
	}
	if k%2 == 0 {
		return k == 2
	}
	for d := 3; d*d <= k; d += 2 {
		if k%d == 0 {
			return false
		}
	}
	return true
}
