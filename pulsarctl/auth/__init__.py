"""Pulsar's authentication providers (tokens, basic) and its authorization rules, for the
server (`pulsarctl serve`, the REST API) to call; the command line is never subject to them."""
