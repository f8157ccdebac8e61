"""Local stand-ins for outside services (the SMTP sink), for the demo and the tests."""
