package simulator

import (
	"container/list"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// PrefixCacheConfig models automatic prefix caching as vLLM's (and
// SGLang's radix cache) does it: the prompt is cut into blocks of
// BlockTokens tokens (words here), each full block is named by a hash
// chained over every block before it, and a request whose leading blocks
// are cached skips their prefill. The cache holds CapacityTokens tokens of
// blocks and evicts the least recently used.
type PrefixCacheConfig struct {
	// Enabled is the default for every request; X-Sim-Options
	// prefix_cache=true|false overrides it per request.
	Enabled        bool `yaml:"enabled"`
	BlockTokens    int  `yaml:"block_tokens"`
	CapacityTokens int  `yaml:"capacity_tokens"`
}

const maxPrefixBlockTokens = 1024

func (c PrefixCacheConfig) validate(bad func(path, format string, args ...any)) {
	if c.BlockTokens < 1 || c.BlockTokens > maxPrefixBlockTokens {
		bad("prefix_cache.block_tokens", "must be between 1 and %d, got %d", maxPrefixBlockTokens, c.BlockTokens)
	}
	if c.CapacityTokens < 0 || c.CapacityTokens > 1<<30 {
		bad("prefix_cache.capacity_tokens", "must be between 0 and %d, got %d", 1<<30, c.CapacityTokens)
	}
}

// prefixCache is the block LRU. Looking a prompt up and inserting its
// blocks is one step, at admission: a request admitted while another
// with the same prefix is still in prefill hits the blocks the other is
// computing, which real engines only share once computed (a simplification
// that sequential probes never see).
type prefixCache struct {
	blockTokens int
	capBlocks   int

	mu     sync.Mutex
	lru    *list.List // of uint64, most recent at the front
	blocks map[uint64]*list.Element
}

func newPrefixCache(c PrefixCacheConfig) *prefixCache {
	block := max(c.BlockTokens, 1)
	return &prefixCache{
		blockTokens: block,
		capBlocks:   c.CapacityTokens / block,
		lru:         list.New(),
		blocks:      map[uint64]*list.Element{},
	}
}

// blockHashes names the full blocks of a prompt's words: block i's hash
// covers every word up to its end, so equal hashes mean equal prefixes.
func (c *prefixCache) blockHashes(promptText string) []uint64 {
	words := strings.FieldsFunc(promptText, unicode.IsSpace)
	n := len(words) / c.blockTokens
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	h := fnv.New64a()
	var prev [8]byte
	for b := range n {
		h.Reset()
		h.Write(prev[:])
		for _, w := range words[b*c.blockTokens : (b+1)*c.blockTokens] {
			h.Write([]byte(w))
			h.Write([]byte{0})
		}
		out[b] = h.Sum64()
		for i := range prev {
			prev[i] = byte(out[b] >> (8 * i))
		}
	}
	return out
}

// admit returns how many of the prompt's tokens are served from cache:
// the leading blocks found, but never the whole prompt (the last token is
// always computed, as vLLM does, so there is a first token to sample). It
// then caches every full block of the prompt as most recently used.
func (c *prefixCache) admit(blocks []uint64, promptTokens int) int {
	if len(blocks) == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for _, b := range blocks {
		if _, ok := c.blocks[b]; !ok {
			break
		}
		hit++
	}
	hit = min(hit, max(promptTokens-1, 0)/c.blockTokens)
	for _, b := range blocks {
		if e, ok := c.blocks[b]; ok {
			c.lru.MoveToFront(e)
			continue
		}
		if c.capBlocks == 0 {
			break
		}
		c.blocks[b] = c.lru.PushFront(b)
	}
	for c.lru.Len() > c.capBlocks {
		e := c.lru.Back()
		delete(c.blocks, e.Value.(uint64))
		c.lru.Remove(e)
	}
	return hit * c.blockTokens
}

// cachedBlocks is how many blocks the cache holds.
func (c *prefixCache) cachedBlocks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// prefixPlan is the cache's part of a request's plan: its blocks when the
// cache is on for it (nil otherwise), and once admitted how many prompt
// tokens came from cache.
type prefixPlan struct {
	on     bool
	blocks []uint64
	cached int
}

// planPrefix decides whether the cache serves a request (the config's
// default or the request's prefix_cache option) and names its blocks.
func (s *Server) planPrefix(promptText string, opts requestOptions) prefixPlan {
	on := s.cfg.PrefixCache.Enabled
	if opts.prefixCache != nil {
		on = *opts.prefixCache
	}
	if !on {
		return prefixPlan{}
	}
	return prefixPlan{on: true, blocks: s.prefix.blockHashes(promptText)}
}

// parsePrefixCacheOption reads X-Sim-Options' prefix_cache value.
func parsePrefixCacheOption(val string) (*bool, error) {
	b, err := strconv.ParseBool(val)
	if err != nil {
		return nil, fmt.Errorf("%s: prefix_cache=%q: want true or false", HeaderOptions, val)
	}
	return &b, nil
}
