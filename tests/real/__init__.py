"""The real pair: tests marked real_models that load the registry's Qwen2.5-Coder / SmolLM2 / Gemma GGUFs
(fetched through the store, cached between runs). Run them one at a time on a shared machine."""
