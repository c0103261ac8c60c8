"""Machine model: datapath peaks and the bound of each measurement."""
