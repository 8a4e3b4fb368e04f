"""``xpubench serve`` and ``run --mode serve``: a load generator against OpenAI-compatible servers
(docs/serving.md); a sweep's points are cases the planner makes (plan/serve.py), each measured in a worker
process of its own against the server its run opened.

- client.py: one streamed request, timed (httpx, async): TTFT, the chunks' times, E2E, usage, the failure;
- bounded.py: what a server sends, read within bounds (one deadline per request, caps on a line, a body
  and what a compressed body inflates to, JSON depth) and its description shaped before it is recorded;
- prompts.py: prompts of a fixed token length (random words from a seed, or a text file), cut by the
  server's own tokenizer;
- sweep.py: one point: closed loop (N users) or open loop (Poisson arrivals), warm-up discarded, request
  count or duration, the per-request and per-point time limits, Ctrl-C keeping what was measured;
- telemetry.py: the server's own Prometheus metrics over a point's window;
- figures.py: a point's figures (percentiles, tokens/s, goodput), the SLO and the capacity line;
- server.py: an engine's server (its record's ServerSpec) started, watched and stopped; a URL's provenance;
- host.py: the server a group of points shares, opened for the run's sweep and found by each point's worker;
- model.py: the GGUF llama-server serves (random weights of a named shape with a synthetic vocabulary, or yours);
- point.py: a point measured in its worker; record.py: its outcome, as a results-file line reads; keys.py:
  what its key holds where the server does not say;
  rerun.py: the ``xpubench serve`` arguments that measure a point again.
"""
