//! Integration tests and benchmarks live in tests/ and benches/.
