"""Smoke tests against a real OpenAI-compatible model server (see scripts/ci/model_server.sh)."""
