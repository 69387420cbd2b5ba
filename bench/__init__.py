"""Benchmarks behind ``make bench``; each module measures one part and returns a result dict."""
