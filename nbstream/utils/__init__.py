"""What every part of the library uses: array names, checks, parameter rules, class sets, threads."""
