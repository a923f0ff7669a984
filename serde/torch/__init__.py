"""The torch bridge, the only place pt2x imports torch (lazily): serialize, deserialize, graph builder, ops, shape env."""
