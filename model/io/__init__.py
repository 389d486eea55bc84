"""Files and models on disk or the Hub: checkpoints, opening other projects' models, the Hub, histories, the
starter, run folders."""
