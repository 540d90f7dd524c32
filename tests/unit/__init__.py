"""Unit tests: no GGUF file is loaded (fakes from tests/support stand in for llama.cpp)."""
