"""``xpubench serve``: a load generator against OpenAI-compatible servers (docs/serving.md).

- client.py: one streamed request, timed (httpx, async): TTFT, the chunks' times, E2E, usage, the failure;
- bounded.py: what a server sends, read within bounds (one deadline per request, caps on a line, a body
  and what a compressed body inflates to, JSON depth) and its description shaped before it is recorded;
- prompts.py: prompts of a fixed token length (random words from a seed, or a text file), cut by the
  server's own tokenizer;
- sweep.py: one point: closed loop (N users) or open loop (Poisson arrivals), warm-up discarded, request
  count or duration, the per-request and per-point time limits, Ctrl-C keeping what was measured;
- figures.py: a point's figures (percentiles, tokens/s, goodput), the SLO and the capacity line;
- server.py: llama.cpp's llama-server started and stopped here, a URL's provenance;
- model.py: the GGUF it serves (random weights of a named shape with a synthetic vocabulary, or yours);
- record.py: a point as a results-file line (a ``serve`` case); target.py: who answers; run.py: the sweep.
"""
