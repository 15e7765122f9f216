"""Client-side staging: packing the source folder and moving data to object storage."""
