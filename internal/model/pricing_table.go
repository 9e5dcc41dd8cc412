package model

// PricingAsOf is the date the shipped price table was taken from the
// providers' public price pages.
const PricingAsOf = "2026-10-27"

// price builds a table entry: input, cached input and output in USD per
// million tokens. A negative cached price (noCache) means the model has no
// cached-input price: cached input is billed as other input.
func price(input, cached, output float64) Pricing {
	p := Pricing{InputPerMTok: input, OutputPerMTok: output}
	if cached >= 0 {
		p.CachedInputPerMTok = &cached
	}
	return p
}

// noCache marks a model without a cached-input price.
const noCache = -1

// prices is the shipped list price of each known model, in USD per million
// tokens, matched by lookupModel (catalog.go). Every price is the provider's
// list price on PricingAsOf; a spec's "pricing" object overrides it (for a
// negotiated rate, a price change after that date, or a model not listed).
//
// What the three numbers cannot say, and how each is billed here:
//
//   - Tiers other than Standard (OpenAI Batch and Flex at half price,
//     Priority and "fast" modes at more, Anthropic's Batch API at half, data
//     residency surcharges) are not modelled: every call is priced at the
//     Standard rate.
//   - Long prompts: OpenAI bills a whole request whose input passes 272K
//     tokens at 2x input and 1.5x output on GPT-5.4 and later (5.4, 5.5, 5.6,
//     6, 6.1), and Claude Haiku 5.5 bills a request whose prompt passes 100K
//     tokens at 5x. The table holds the short-prompt price, so such requests
//     are underestimated.
//   - Cache writes: Anthropic bills tokens written to the prompt cache at
//     1.25x base input (5-minute cache) or 2x (1-hour cache), and OpenAI bills
//     them at 1.25x on GPT-5.6 and later. lt.Usage has no count of
//     cache-write tokens, so they are billed here as ordinary input: a known
//     underestimate, small next to the savings of the cache reads that follow.
//   - Cached input is the provider's "Cached input" (OpenAI) or "Cache hits &
//     refreshes" (Anthropic) price.
var prices = map[string]map[string]Pricing{
	// OpenAI: from the "Pricing" page of OpenAI's API documentation
	// (Standard tier, text tokens, prompts up to 272K input tokens) and the
	// per-model pages of the same documentation, including the price
	// changes in its changelog (GPT-5.6 Terra and Luna cut on 2026-07-30).
	// GPT-5.6 Sol is at its list price; OpenAI ran a promotional $4 / $0.40
	// / $20 through at least 2026-11-21, which a spec can set as pricing.
	providerOpenAI: {
		"gpt-6.1-sol":           price(2, 0.20, 10),
		"gpt-6.1-terra":         price(1, 0.05, 5),
		"gpt-6-astra":           price(10, 1, 50),
		"gpt-6-sol":             price(2, 0.20, 10),
		"gpt-6-luna":            price(0.10, 0.01, 0.50),
		"gpt-5.6":               price(5, 0.50, 30), // alias of gpt-5.6-sol
		"gpt-5.6-sol":           price(5, 0.50, 30),
		"gpt-5.6-terra":         price(2, 0.20, 12),
		"gpt-5.6-luna":          price(0.20, 0.02, 1.20),
		"gpt-5.5":               price(5, 0.50, 30),
		"gpt-5.5-pro":           price(30, noCache, 180),
		"gpt-5.4":               price(2.50, 0.25, 15),
		"gpt-5.4-pro":           price(30, noCache, 180),
		"gpt-5.4-mini":          price(0.75, 0.075, 4.50),
		"gpt-5.4-nano":          price(0.20, 0.02, 1.25),
		"gpt-5.3":               price(1.75, 0.175, 14),
		"gpt-5.3-codex":         price(1.75, 0.175, 14),
		"gpt-5.2":               price(1.75, 0.175, 14),
		"gpt-5.2-pro":           price(21, noCache, 168),
		"gpt-5.1":               price(1.25, 0.125, 10),
		"gpt-5.1-codex-mini":    price(0.25, 0.025, 2),
		"gpt-5":                 price(1.25, 0.125, 10),
		"gpt-5-mini":            price(0.25, 0.025, 2),
		"gpt-5-nano":            price(0.05, 0.005, 0.40),
		"gpt-5-pro":             price(15, noCache, 120),
		"gpt-4.1":               price(2, 0.50, 8),
		"gpt-4.1-mini":          price(0.40, 0.10, 1.60),
		"gpt-4.1-nano":          price(0.10, 0.025, 0.40),
		"gpt-4o":                price(2.50, 1.25, 10),
		"gpt-4o-2024-05-13":     price(5, noCache, 15),
		"gpt-4o-mini":           price(0.15, 0.075, 0.60),
		"chatgpt-4o":            price(5, noCache, 15),
		"o1":                    price(15, 7.50, 60),
		"o1-preview":            price(15, 7.50, 60),
		"o1-mini":               price(1.10, 0.55, 4.40),
		"o1-pro":                price(150, noCache, 600),
		"o3":                    price(2, 0.50, 8),
		"o3-pro":                price(20, noCache, 80),
		"o3-mini":               price(1.10, 0.55, 4.40),
		"o3-deep-research":      price(10, 2.50, 40),
		"o4-mini":               price(1.10, 0.275, 4.40),
		"o4-mini-deep-research": price(2, 0.50, 8),
		"codex-mini":            price(1.50, 0.375, 6),
		"gpt-4-turbo":           price(10, noCache, 30),
		"gpt-4":                 price(30, noCache, 60),
		"gpt-4-32k":             price(60, noCache, 120),
		"gpt-3.5-turbo":         price(0.50, noCache, 1.50),
	},
	// Anthropic: from the "Pricing" page of the Claude documentation
	// ("Model pricing" table) and the model overview pages of the same
	// documentation (Claude Haiku 5.5, released 2026-10-07, and the cut of
	// Claude Sonnet 5.5's cache hits to 0.05x on the same day). Claude
	// Mythos shares Claude Fable's prices (limited availability).
	providerAnthropic: {
		"claude-fable-5-1":  price(10, 0.25, 50),
		"claude-mythos-5-1": price(10, 0.25, 50),
		"claude-fable-5":    price(10, 1, 50),
		"claude-mythos-5":   price(10, 1, 50),
		"claude-opus-5-5":   price(4, 0.20, 20),
		"claude-opus-5":     price(5, 0.50, 25),
		"claude-sonnet-5-5": price(2, 0.10, 10),
		"claude-sonnet-5":   price(2, 0.20, 10),
		"claude-haiku-5-5":  price(0.10, 0.01, 0.50),
		"claude-opus-4-8":   price(5, 0.50, 25),
		"claude-opus-4-7":   price(5, 0.50, 25),
		"claude-opus-4-6":   price(5, 0.50, 25),
		"claude-opus-4-5":   price(5, 0.50, 25),
		"claude-opus-4-1":   price(15, 1.50, 75),
		"claude-opus-4":     price(15, 1.50, 75),
		"claude-sonnet-4-6": price(3, 0.30, 15),
		"claude-sonnet-4-5": price(3, 0.30, 15),
		"claude-sonnet-4":   price(3, 0.30, 15),
		"claude-haiku-4-5":  price(1, 0.10, 5),
		"claude-3-7-sonnet": price(3, 0.30, 15),
		"claude-3-5-sonnet": price(3, 0.30, 15),
		"claude-3-5-haiku":  price(0.80, 0.08, 4),
		"claude-3-opus":     price(15, 1.50, 75),
		"claude-3-haiku":    price(0.25, 0.03, 1.25),
	},
}

// DefaultPricing returns the shipped price of a model, matching provider
// ("openai", "anthropic") and model name; dated snapshot names match their
// base model (e.g. "gpt-4o-2024-08-06" → "gpt-4o",
// "claude-sonnet-4-5-20250929" → "claude-sonnet-4-5"), longest prefix first,
// so "gpt-4o-mini" is not priced as "gpt-4o". ok is false for unknown models
// (and for openai-compatible and scripted: local models cost nothing unless
// the spec gives pricing).
//
// The returned Pricing is a copy: changing it never changes the table.
func DefaultPricing(provider, name string) (p Pricing, ok bool) {
	p, ok = lookupModel(prices, provider, name)
	if ok && p.CachedInputPerMTok != nil {
		c := *p.CachedInputPerMTok
		p.CachedInputPerMTok = &c
	}
	return p, ok
}
