"""Runs on: the Spark driver, beside the copy rather than in it: MirrorMaker 2's heartbeats
and checkpoints, and the topic config and ACL syncs. The copy never waits for them."""
