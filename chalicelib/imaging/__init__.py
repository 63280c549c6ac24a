"""Images: the only package that imports Pillow. Sniffing, decode limits, the sandboxed
decoding child, and making the renditions."""
