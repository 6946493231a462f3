"""Reading evaluation files into a Dataset, distilling arena pairs, simulating data."""
