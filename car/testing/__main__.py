"""`python -m car.testing`: run the loopback model server (see `car.testing.loopback.main`)."""

from car.testing.loopback import main

main()
