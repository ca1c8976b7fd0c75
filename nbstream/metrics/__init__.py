"""Classification metrics summed batch by batch, and the prequential quality of served predictions."""
