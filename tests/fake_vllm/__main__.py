"""``python -m fake_vllm`` (from tests/): run the fake vLLM server until Ctrl-C."""

from fake_vllm.server import main

raise SystemExit(main())
