"""Answers to requests of the Open Inference Protocol (v2 REST): the models a worker can be asked,
the tensors of a request and an answer, and the server that speaks it (``worker serve --http-port``,
``worker serve-model``)."""
