"""Running rocketq's servers: configuration (:mod:`.config`) and the one-process standalone mode
(:mod:`.standalone`)."""
