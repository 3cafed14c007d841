"""Settings read from the environment and chatitego.toml: the lowest layer."""
