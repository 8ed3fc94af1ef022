from car.cli import main

main()
