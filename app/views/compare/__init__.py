"""The Compare tab's parts: runs and the worker that trains variants together."""
