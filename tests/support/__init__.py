"""What tests share and no test file holds: fakes, tiny-model writers, server helpers. Tests import
from here, never from one another."""
