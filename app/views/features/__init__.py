"""The Features tab: sparse autoencoders on a site of a layer, trained, evaluated and read
(:mod:`model.interp.sae`)."""
