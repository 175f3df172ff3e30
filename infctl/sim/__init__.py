"""The simulated engine: a continuous-batching scheduler and KV model behind vLLM/SGLang personalities."""
