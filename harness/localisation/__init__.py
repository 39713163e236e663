"""Where along the network a packed lane first differs: hooked modules, their floors and errors."""
