"""The models a group learns side by side: the served one and its challengers."""
