"""infctl: operate LLM inference fleets (vLLM, SGLang) the cloud-native way."""

__version__ = "0.1.0"
