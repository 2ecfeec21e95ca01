"""The provider emulator: a local HTTP server speaking the real wire protocols of OpenAI,
Anthropic, Gemini, Groq, DeepSeek, Mistral, Together, OpenRouter, xAI, Fireworks and Ollama on one port, with fault injection (README.md, Contributing).

It is a separate program that ships in the package: it imports nothing from the engine,
store or providers, only the standard library, Starlette and uvicorn (the ``emulator``
extra). Modules: ``app`` (the ASGI app and the ``/_emulator`` control API), one module per
provider (``openai``, ``groq``, ``deepseek``, ``mistral``, ``together``, ``openrouter``, ``xai``, ``fireworks``, ``anthropic``, ``gemini``, ``ollama``), ``state`` (clock,
files, batches, stats), ``faults`` (rules), ``handling`` (the steps every request takes),
``answers`` (deterministic, schema-conforming answers), ``server`` (``serve``), ``env``
(shell exports) and ``testing`` (``RunningEmulator`` for tests).
"""
