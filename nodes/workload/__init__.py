"""What drives the hosts from outside: trace readers (GOAL schedules) and their replay."""
