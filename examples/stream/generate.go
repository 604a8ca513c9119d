package main

import (
	_ "embed"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"unicode"
)

// corpus is the text the generator's Markov chain learns from.
//
//go:embed corpus.txt
var corpus string

// chain is a first-order Markov chain over the corpus's words: for each
// word, the words that follow it, in the order they appear.
type chain struct {
	next   map[string][]string
	starts []string // words that begin a sentence
}

// newChain learns a chain from text. The last word leads back to the
// first, so every word has a successor.
func newChain(text string) *chain {
	words := strings.Fields(text)
	c := &chain{next: make(map[string][]string)}
	for i, w := range words {
		c.next[w] = append(c.next[w], words[(i+1)%len(words)])
		if i == 0 || endsSentence(words[i-1]) {
			c.starts = append(c.starts, w)
		}
	}
	return c
}

// Generate answers prompt with at most max tokens (max > 0). The answer
// is deterministic: the same prompt gives the same tokens. The first token
// is a capitalised word; every later one is a space and a word, so joining the tokens
// gives the text. It stops early at the end of a sentence once it has
// said at least half of max.
func Generate(prompt string, max int) []string {
	return defaultChain.generate(prompt, max)
}

var defaultChain = newChain(corpus)

func (c *chain) generate(prompt string, max int) []string {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x77656674)) // "weft"
	word := c.start(prompt, rng)
	toks := []string{capitalize(word)}
	for len(toks) < max && !(len(toks) >= max/2 && endsSentence(word)) {
		succ := c.next[word]
		word = succ[rng.IntN(len(succ))]
		toks = append(toks, " "+word)
	}
	return toks
}

// start picks the first word: the first word of the prompt the chain
// knows (so the answer is about the question, a little), else a word that
// begins a sentence.
func (c *chain) start(prompt string, rng *rand.Rand) string {
	for _, w := range strings.Fields(prompt) {
		w = strings.ToLower(strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }))
		if _, ok := c.next[w]; ok && w != "" {
			return w
		}
	}
	return c.starts[rng.IntN(len(c.starts))]
}

func endsSentence(w string) bool { return strings.HasSuffix(w, ".") }

// capitalize upper-cases the first letter of w.
func capitalize(w string) string {
	r := []rune(w)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}
