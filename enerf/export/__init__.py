"""What a trained NeRF is turned into (``enerf export ACTION``, ``enerf.cli.export``): videos, meshes,
depth and point clouds; whole images of a run come from ``enerf.render.images``, splats from
``enerf.splats``.

    video.py        enerf export video (enerf render): camera paths rendered and encoded to mp4
    views.py        a set of cameras rendered to depth, accumulation, colour and normals
    depth.py        enerf export depth: metric depth as arrays and 16-bit PNGs
    pointcloud.py   enerf export pointcloud: points back-projected from rendered depth
    nerf_mesh.py    enerf export mesh (enerf mesh): density on a grid, marching cubes, coloured vertices
    tsdf.py         enerf mesh --method tsdf: the surface fused from rendered depth
    isosurface.py   chunked grid queries and marching cubes (shared with enerf.shapes)
    simplify.py     quadric decimation (enerf mesh --faces)
    texture.py      UV atlases and baked textures (enerf mesh --texture)
    mesh_files.py   mesh files by suffix (.ply, .obj, .glb, ...)
"""
