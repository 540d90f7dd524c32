"""Integration tests: tiny or toy GGUF models (tests/support/tiny_gguf.py, toy_models.py) loaded by
llama.cpp, servers and clients over 127.0.0.1, whole commands in subprocesses."""
