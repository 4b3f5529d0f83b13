"""All prompt text: the Observer's, the Reflector's, and what the acting agent reads."""
